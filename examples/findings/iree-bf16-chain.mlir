// IREE (check 3 of the bf16 transformer's layer norm, jnp.square(x - mean)): the whole
// module squares the f32 difference, not its bf16 rounding (excess precision).
// conformance check examples/findings/iree-bf16-chain.mlir --backend iree --seed 0
func.func @main(%a: tensor<16xbf16>, %b: tensor<16xbf16>) -> tensor<16xbf16> {
  %0 = stablehlo.subtract %a, %b : tensor<16xbf16>
  %1 = stablehlo.multiply %0, %0 : tensor<16xbf16>
  func.return %1 : tensor<16xbf16>
}
