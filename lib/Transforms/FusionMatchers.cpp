//===- FusionMatchers.cpp - recognising unfused chains ----------*- C++ -*-===//

#include "FusionMatchers.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/SmallPtrSet.h"

#include <cmath>

using namespace mlir;
using namespace xfmr;

std::optional<double> fusion::splatValue(Value value) {
  auto constant = value.getDefiningOp<arith::ConstantOp>();
  if (!constant)
    return std::nullopt;
  if (auto dense = dyn_cast<DenseFPElementsAttr>(constant.getValue()); dense && dense.isSplat())
    return dense.getSplatValue<APFloat>().convertToDouble();
  if (auto scalar = dyn_cast<FloatAttr>(constant.getValue()))
    return scalar.getValueAsDouble();
  return std::nullopt;
}

bool fusion::isMaskingConstant(Value value) {
  std::optional<double> splat = splatValue(value);
  return splat && (std::isinf(*splat) ? *splat < 0 : *splat <= -1e30);
}

std::optional<int64_t> fusion::reduceAxis(Value value, ReduceKind kind, Value &input) {
  auto reduce = value.getDefiningOp<ReduceOp>();
  if (!reduce || reduce.getKind() != kind)
    return std::nullopt;
  input = reduce.getInput();
  return reduce.getNormalizedAxis();
}

std::optional<fusion::SoftmaxChain> fusion::matchSoftmaxChain(Value result) {
  auto div = result.getDefiningOp<DivOp>();
  if (!div)
    return std::nullopt;
  auto exp = div.getLhs().getDefiningOp<math::ExpOp>();
  Value summed;
  std::optional<int64_t> axis = reduceAxis(div.getRhs(), ReduceKind::sum, summed);
  if (!exp || !axis || summed != exp.getResult() ||
      exp.getType() != result.getType())
    return std::nullopt;
  SoftmaxChain chain{exp.getOperand(), *axis, {div, div.getRhs().getDefiningOp(), exp}};
  // With the max subtracted first (the numerically safe form).
  if (auto sub = exp.getOperand().getDefiningOp<SubOp>()) {
    Value maxInput;
    std::optional<int64_t> maxAxis = reduceAxis(sub.getRhs(), ReduceKind::max, maxInput);
    if (maxAxis && *maxAxis == *axis && maxInput == sub.getLhs() &&
        sub.getType() == sub.getLhs().getType()) {
      chain.input = sub.getLhs();
      chain.ops.append({sub, sub.getRhs().getDefiningOp()});
    }
  }
  return chain;
}

bool fusion::isSelfContained(ArrayRef<Operation *> ops) {
  llvm::SmallPtrSet<Operation *, 8> inside(ops.begin(), ops.end());
  for (Operation *op : ops.drop_front())
    for (Operation *user : op->getUsers())
      if (!inside.contains(user))
        return false;
  return true;
}

bool fusion::isDefinedBefore(Value value, Operation *op) {
  Operation *ancestor = value.getParentBlock()->findAncestorOpInBlock(*op);
  if (!ancestor)
    return false;
  Operation *def = value.getDefiningOp();
  return !def || (def != ancestor && def->isBeforeInBlock(ancestor));
}
