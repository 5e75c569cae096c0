// IREE (checks 2 and 3 of the f32 mlp): multiply(convert(i1 mask), x) compiled whole
// gives 0 where the mask is 0 and x is NaN or inf; the spec's IEEE product is NaN.
// conformance check examples/findings/iree-mask-multiply.mlir --backend iree --seed 0
func.func @main(%mask: tensor<16xi1>, %x: tensor<16xf32>) -> tensor<16xf32> {
  %0 = stablehlo.convert %mask : (tensor<16xi1>) -> tensor<16xf32>
  %1 = stablehlo.multiply %0, %x : tensor<16xf32>
  func.return %1 : tensor<16xf32>
}
