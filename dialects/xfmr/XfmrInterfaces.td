//===- XfmrInterfaces.td - xfmr op interfaces --------------*- tablegen -*-===//

#ifndef XFMR_INTERFACES_TD
#define XFMR_INTERFACES_TD

include "mlir/IR/OpBase.td"

def Xfmr_DifferentiableOpInterface : OpInterface<"DifferentiableOpInterface"> {
  let cppNamespace = "::xfmr";
  let description = [{
    An op that knows its reverse-mode adjoint. `xfmr-autodiff` walks a
    function backwards and, for each op some of whose results carry a
    gradient, asks the op for the gradients of its operands. Adjoints are
    built from xfmr ops, so the fusion passes and kernels optimise the
    backward pass like the forward one.
  }];
  let methods = [
    InterfaceMethod<[{
        Builds, at the builder's insertion point, the gradients of this op's
        operands from `resultGrads` (one per result, null where no gradient
        flows). Fills `operandGrads` (one per operand, null where the operand
        takes no gradient: integer ids, masks, or a result that needs none).
        The op's own operands and results may be used.
      }],
      "::llvm::LogicalResult", "buildAdjoint",
      (ins "::mlir::OpBuilder &":$builder, "::mlir::ValueRange":$resultGrads,
           "::llvm::SmallVectorImpl<::mlir::Value> &":$operandGrads)>,
  ];
}

def Xfmr_ActivationOpInterface : OpInterface<"ActivationOpInterface"> {
  let cppNamespace = "::xfmr";
  let description = [{
    An elementwise activation (relu, gelu, silu, tanh). Lowerings, the
    epilogue fusion and the adjoints treat every activation alike through
    the `Activation` it computes.
  }];
  let methods = [
    InterfaceMethod<"The activation this op computes.", "::xfmr::Activation",
                    "getActivation">,
  ];
}

#endif // XFMR_INTERFACES_TD
