// IREE (check 2 of the ranking model's top_k, jax's decomposition): a stable sort with
// compare GT TOTALORDER and a slice of the first 3, compiled whole, never picks a +NaN
// (the largest in the total order) and ties -0 with +0; the sort alone is right.
// conformance check examples/findings/iree-top-k.mlir --backend iree --seed 0
func.func @main(%x: tensor<4x6xf32>) -> (tensor<4x3xf32>, tensor<4x3xi32>) {
  %i = stablehlo.iota dim = 1 : tensor<4x6xi32>
  %s:2 = "stablehlo.sort"(%x, %i) ({
  ^bb0(%p: tensor<f32>, %q: tensor<f32>, %u: tensor<i32>, %w: tensor<i32>):
    %c = stablehlo.compare GT, %p, %q, TOTALORDER : (tensor<f32>, tensor<f32>) -> tensor<i1>
    stablehlo.return %c : tensor<i1>
  }) {dimension = 1 : i64, is_stable = true} : (tensor<4x6xf32>, tensor<4x6xi32>) -> (tensor<4x6xf32>, tensor<4x6xi32>)
  %v = stablehlo.slice %s#0 [0:4, 0:3] : (tensor<4x6xf32>) -> tensor<4x3xf32>
  %k = stablehlo.slice %s#1 [0:4, 0:3] : (tensor<4x6xi32>) -> tensor<4x3xi32>
  func.return %v, %k : tensor<4x3xf32>, tensor<4x3xi32>
}
