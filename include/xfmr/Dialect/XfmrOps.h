//===- XfmrOps.h - xfmr operations ------------------------------*- C++ -*-===//

#ifndef XFMR_DIALECT_XFMROPS_H
#define XFMR_DIALECT_XFMROPS_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/Dialect/Bufferization/IR/BufferizableOpInterface.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "xfmr/Dialect/XfmrDialect.h"

#include "xfmr/XfmrEnums.h.inc"
#include "xfmr/XfmrInterfaces.h.inc"

#define GET_ATTRDEF_CLASSES
#include "xfmr/XfmrAttrs.h.inc"

namespace xfmr {
/// Positions of the batch, heads, sequence and head-dim dimensions of an
/// attention operand in its layout.
struct AttentionDims {
  int64_t batch, heads, seq, headDim;
};

/// Marks a function declaration (the runtime's reductions) that uses no
/// OpenMP and that the thread that started an OpenMP team may call inside
/// it (MPI's MPI_THREAD_FUNNELED): xfmr-merge-parallel-regions runs such
/// calls in an omp.master instead of splitting the team.
inline constexpr llvm::StringLiteral kMainThreadOnlyAttrName = "xfmr.main_thread_only";

/// Result type of a broadcasting binary op (shared by add, sub, mul, ...).
llvm::LogicalResult inferBroadcastBinaryType(std::optional<mlir::Location> loc,
                                             mlir::Value lhs, mlir::Value rhs,
                                             llvm::SmallVectorImpl<mlir::Type> &results);
} // namespace xfmr

#define GET_OP_CLASSES
#include "xfmr/XfmrOps.h.inc"

namespace xfmr {

/// The numpy broadcast of two static shapes, or failure if they do not
/// broadcast.
mlir::FailureOr<llvm::SmallVector<int64_t>>
broadcastShapes(llvm::ArrayRef<int64_t> lhs, llvm::ArrayRef<int64_t> rhs);

/// `activation` applied to `x` as its xfmr op (x itself for none).
mlir::Value createActivation(mlir::OpBuilder &b, mlir::Location loc, mlir::Value x,
                             Activation activation);

} // namespace xfmr

#endif // XFMR_DIALECT_XFMROPS_H
