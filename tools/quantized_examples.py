"""Worked examples for specs/quantized_forms.yaml (prints one line per op; the table's
`examples:` were written from them): Python's math in float64 from the spec's
steps, away from ties (so that float64 and f32 agree); independent of the oracle."""
import math
F = {
 'abs': abs, 'negate': lambda x: -x, 'sign': lambda x: (x > 0) - (x < 0),
 'ceil': math.ceil, 'floor': math.floor,
 'round_nearest_afz': lambda x: math.copysign(math.floor(abs(x) + 0.5), x),
 'round_nearest_even': lambda x: float(round(x)),
 'cbrt': lambda x: math.copysign(abs(x) ** (1 / 3), x), 'cosine': math.cos, 'exponential': math.exp,
 'exponential_minus_one': math.expm1, 'log': math.log, 'log_plus_one': math.log1p,
 'logistic': lambda x: 1 / (1 + math.exp(-x)), 'rsqrt': lambda x: 1 / math.sqrt(x),
 'sine': math.sin, 'sqrt': math.sqrt, 'tan': math.tan, 'tanh': math.tanh,
 'atan2': math.atan2, 'divide': lambda a, b: a / b, 'maximum': max, 'minimum': min,
 'multiply': lambda a, b: a * b, 'power': lambda a, b: a ** b, 'remainder': math.fmod,
 'subtract': lambda a, b: a - b}
UN = ([4, 12, 20], 0.125, 0)          # [0.5, 1.5, 2.5]
BIN = (([12, -20, 40], 0.125, 0), ([8, 16, -12], 0.25, 0))   # [1.5, -2.5, 5.0], [2, 4, -3]
SCALES = [0.125, 0.1875, 0.25, 0.375, 0.5, 0.75, 1.0, 0.0625, 0.046875, 0.03125, 0.015625]

def deq(v, s, z):
    return [(x - z) * s for x in v]

def pick(vals):
    for s in SCALES:
        for zp in (0, -3, 5):
            q = [v / s + zp for v in vals]
            if all(-128 <= x <= 127 and abs(x - math.floor(x) - 0.5) > 0.05 for x in q) \
                    :
                return s, zp, [int(round(x)) for x in q]
    raise SystemExit(f'no scale for {vals}')

def t(s, z, n=3):
    return f"tensor<{n}x!quant.uniform<i8:f32, {s}{':' + str(z) if z else ''}>>"

for op, f in F.items():
    binary = op in ('atan2', 'divide', 'maximum', 'minimum', 'multiply', 'power', 'remainder', 'subtract')
    if binary:
        (lv, ls, lz), (rv, rs, rz) = BIN
        a, b = deq(lv, ls, lz), deq(rv, rs, rz)
        vals = [f(x, y) for x, y in zip(a, b)]
        s, zp, out = pick(vals)
        print(f"{op}: lhs {t(ls, lz)} {lv} rhs {t(rs, rz)} {rv} -> {t(s, zp)} {out}  # {[round(v, 4) for v in vals]}")
    else:
        v, s0, z0 = UN if op in ('log', 'log_plus_one', 'sqrt', 'rsqrt') else ([-12, 4, 20], 0.125, 0)
        a = deq(v, s0, z0)
        vals = [float(f(x)) for x in a]
        s, zp, out = pick(vals)
        print(f"{op}: operand {t(s0, z0)} {v} -> {t(s, zp)} {out}  # {[round(x, 4) for x in vals]}")
