//===- GpuAttentionKernel.cpp - fused attention as one GPU kernel -*- C++ -*-===//
//
// One thread block per (query tile, head, batch), one thread per query row:
//
//   q = scale * Q[row]; o = 0; m = -inf; l = 0        private to the thread
//   for each key tile (up to the block's causal limit):
//     K_tile, V_tile <- K, V                         shared, loaded by all
//     barrier
//     s_j = q . K_tile[j] + biases, -inf if masked   private [bk]
//     m' = max(m, max_j s_j); p_j = e^(s_j - m')
//     o = o e^(m - m') + sum_j p_j V_tile[j]; l = l e^(m - m') + sum_j p_j
//     barrier
//   out[row] = o / l (0 where nothing was visible); lse = m + log l
//
// The code between barriers is written once, as a function of the thread
// id, and placed either inside a gpu.launch (threads are GPU threads) or,
// when emulating, inside a loop over the block's threads with the private
// state in arrays indexed by thread, so that the same kernel runs on a CPU.
//
//===----------------------------------------------------------------------===//

#include "../XfmrToCpuKernels/Kernels.h"
#include "xfmr/Conversion/Passes.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace xfmr {
#define GEN_PASS_DEF_CONVERTXFMRTOGPUKERNELS
#include "xfmr/Conversion/Passes.h.inc"
} // namespace xfmr

using namespace mlir;
using namespace xfmr;
using namespace xfmr::cpu;

namespace {

/// Query rows (threads) per block, and the bytes of shared memory the key
/// and value tiles may take (leaving room for two blocks per SM).
constexpr int64_t kMaxRowsPerBlock = 128;
constexpr int64_t kWarp = 32;
constexpr int64_t kSharedBytes = 32 * 1024;
constexpr int64_t kMaxKeysPerTile = 64;

/// Where the code of one thread block goes: a gpu.launch body, or (when
/// emulating) loops on the CPU.
class ThreadBlockBuilder {
public:
  ThreadBlockBuilder(KernelBuilder &kb, bool emulate, int64_t threads)
      : kb(kb), b(kb.builder()), loc(kb.location()), emulate(emulate), threads(threads) {}

  /// Builds `body(blockX, blockY, blockZ)` for each block of the grid; the
  /// shared arrays of `sharedShapes` are passed to it.
  void forEachBlock(std::array<int64_t, 3> grid, ArrayRef<SmallVector<int64_t>> sharedShapes,
                    function_ref<void(std::array<Value, 3>, ArrayRef<Value>)> body) {
    Type f32 = b.getF32Type();
    if (emulate) {
      kb.forLoop(kb.index(0), kb.index(grid[2]), 1, [&](Value z) {
        kb.forLoop(kb.index(0), kb.index(grid[1]), 1, [&](Value y) {
          kb.forLoop(kb.index(0), kb.index(grid[0]), 1, [&](Value x) {
            SmallVector<Value> shared;
            for (ArrayRef<int64_t> shape : sharedShapes)
              shared.push_back(kb.allocate(shape, f32));
            body({x, y, z}, shared);
          });
        });
      });
      return;
    }
    // Shared memory as workgroup-space globals rather than launch
    // attributions: the buffer deallocation pipeline, which runs after this,
    // would add ownership arguments to a launch body with memref arguments.
    auto workgroup = gpu::AddressSpaceAttr::get(b.getContext(), gpu::AddressSpace::Workgroup);
    auto module = b.getInsertionBlock()->getParentOp()->getParentOfType<ModuleOp>();
    SymbolTable symbols(module);
    SmallVector<memref::GlobalOp> globals;
    for (ArrayRef<int64_t> shape : sharedShapes) {
      auto type = MemRefType::get(shape, f32, MemRefLayoutAttrInterface(), workgroup);
      OpBuilder detached(b.getContext());
      auto global = memref::GlobalOp::create(detached, loc, "__xfmr_shared",
                                             b.getStringAttr("private"), type, Attribute(),
                                             /*constant=*/false, b.getI64IntegerAttr(16));
      symbols.insert(global, module.getBody()->begin());
      globals.push_back(global);
    }
    auto launch = gpu::LaunchOp::create(b, loc, kb.index(grid[0]), kb.index(grid[1]),
                                        kb.index(grid[2]), kb.index(threads), kb.index(1),
                                        kb.index(1));
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(&launch.getBody().front());
    gpu::TerminatorOp::create(b, loc);
    b.setInsertionPointToStart(&launch.getBody().front());
    threadId = launch.getThreadIds().x;
    gpu::KernelDim3 blocks = launch.getBlockIds();
    SmallVector<Value> shared;
    for (memref::GlobalOp global : globals)
      shared.push_back(memref::GetGlobalOp::create(b, loc, global.getType(), global.getSymName()));
    body({blocks.x, blocks.y, blocks.z}, shared);
  }

  /// Code run by every thread of the block, followed by a barrier.
  void phase(function_ref<void(Value)> body) {
    if (emulate) {
      kb.forLoop(kb.index(0), kb.index(threads), 1, body);
      return;
    }
    body(threadId);
    gpu::BarrierOp::create(b, loc);
  }

  /// An f32 array of `shape` that each thread has its own copy of.
  Value privateArray(ArrayRef<int64_t> shape) {
    Type f32 = b.getF32Type();
    if (!emulate)
      return memref::AllocaOp::create(b, loc, MemRefType::get(shape, f32));
    SmallVector<int64_t> perThread = {threads};
    llvm::append_range(perThread, shape);
    return kb.allocate(perThread, f32);
  }

  /// Indices of a private array for `thread`.
  SmallVector<Value> at(Value thread, ValueRange indices) {
    SmallVector<Value> result;
    if (emulate)
      result.push_back(thread);
    llvm::append_range(result, indices);
    return result;
  }

private:
  KernelBuilder &kb;
  OpBuilder &b;
  Location loc;
  bool emulate;
  int64_t threads;
  Value threadId;
};

class AttentionKernel {
public:
  AttentionKernel(KernelBuilder &kb, const AttentionOperands &in, bool emulate)
      : kb(kb), b(kb.builder()), loc(kb.location()), in(in) {
    auto q = cast<MemRefType>(in.q.getType());
    auto k = cast<MemRefType>(in.k.getType());
    batch = q.getDimSize(in.dims.batch);
    heads = q.getDimSize(in.dims.heads);
    seqQ = q.getDimSize(in.dims.seq);
    headDim = q.getDimSize(in.dims.headDim);
    seqK = k.getDimSize(in.dims.seq);
    rowsPerBlock = std::min(kMaxRowsPerBlock, (seqQ + kWarp - 1) / kWarp * kWarp);
    keysPerTile = std::clamp<int64_t>(kSharedBytes / (2 * 4 * headDim), 1, kMaxKeysPerTile);
    keysPerTile = std::min(keysPerTile, seqK);
    block.emplace(kb, emulate, rowsPerBlock);
  }

  void emit() {
    int64_t queryTiles = (seqQ + rowsPerBlock - 1) / rowsPerBlock;
    SmallVector<int64_t> tileShape = {keysPerTile, headDim};
    block->forEachBlock({queryTiles, heads, batch}, {tileShape, tileShape},
                        [&](std::array<Value, 3> ids, ArrayRef<Value> shared) {
                          emitBlock(ids[2], ids[1], kb.muli(ids[0], rowsPerBlock), shared[0],
                                    shared[1]);
                        });
  }

private:
  Value cmpi(arith::CmpIPredicate predicate, Value x, Value y) {
    return arith::CmpIOp::create(b, loc, predicate, x, y);
  }
  Value isNegInf(Value x) {
    return arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, x, kb.f32(kNegInf));
  }

  /// Calls `body(row)` for a thread whose query row exists.
  void ifRowExists(Value q0, Value thread, function_ref<void(Value)> body) {
    Value row = kb.addi(q0, thread);
    kb.ifThen(cmpi(arith::CmpIPredicate::ult, row, kb.index(seqQ)), [&] { body(row); });
  }

  /// Key tiles the block at q0 reads: all, or when causal those holding a
  /// key its last row sees (key <= row + seq_k - seq_q).
  Value keyTileCount(Value q0) {
    int64_t all = (seqK + keysPerTile - 1) / keysPerTile;
    if (!in.causal)
      return kb.index(all);
    Value lastRow = kb.mini(kb.addi(q0, kb.index(rowsPerBlock - 1)), kb.index(seqQ - 1));
    Value keys = kb.addi(lastRow, kb.index(seqK - seqQ + 1));
    keys = arith::MaxSIOp::create(b, loc, kb.mini(keys, kb.index(seqK)), kb.index(0));
    return arith::CeilDivSIOp::create(b, loc, keys, kb.index(keysPerTile));
  }

  void emitBlock(Value bi, Value hi, Value q0, Value keyTile, Value valueTile) {
    Value query = block->privateArray({headDim});
    Value acc = block->privateArray({headDim});
    Value scores = block->privateArray({keysPerTile});
    Value max = block->privateArray({1});
    Value sum = block->privateArray({1});
    Value zero = kb.index(0);
    auto forHeadDim = [&](function_ref<void(Value)> body) {
      kb.forLoop(zero, kb.index(headDim), 1, body);
    };

    block->phase([&](Value t) {
      ifRowExists(q0, t, [&](Value row) {
        forHeadDim([&](Value c) {
          kb.store(kb.mul(kb.load(in.q, in.at(bi, row, hi, c)), kb.f32(in.scale)), query,
                   block->at(t, {c}));
          kb.store(kb.f32(0.0), acc, block->at(t, {c}));
        });
        kb.store(kb.f32(kNegInf), max, block->at(t, {zero}));
        kb.store(kb.f32(0.0), sum, block->at(t, {zero}));
      });
    });

    kb.forLoop(zero, keyTileCount(q0), 1, [&](Value tile) {
      Value k0 = kb.muli(tile, keysPerTile);
      // Coalesced: consecutive threads read consecutive head-dim elements.
      block->phase([&](Value t) {
        kb.forLoop(t, kb.index(keysPerTile * headDim), rowsPerBlock, [&](Value element) {
          Value j = arith::DivUIOp::create(b, loc, element, kb.index(headDim));
          Value c = arith::RemUIOp::create(b, loc, element, kb.index(headDim));
          Value key = kb.addi(k0, j);
          Value valid = cmpi(arith::CmpIPredicate::ult, key, kb.index(seqK));
          Value source = kb.mini(key, kb.index(seqK - 1));
          for (auto [operand, tileBuffer] : {std::pair(in.k, keyTile), std::pair(in.v, valueTile)})
            kb.store(kb.select(valid, kb.load(operand, in.at(bi, source, hi, c)), kb.f32(0.0)),
                     tileBuffer, {j, c});
        });
      });
      block->phase([&](Value t) {
        ifRowExists(q0, t, [&](Value row) {
          emitTileUpdate(bi, hi, row, k0, keyTile, valueTile, t, query, acc, scores, max, sum);
        });
      });
    });

    block->phase([&](Value t) {
      ifRowExists(q0, t, [&](Value row) {
        Value l = kb.load(sum, block->at(t, {zero}));
        Value empty = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, l, kb.f32(0.0));
        Value inverse = kb.select(empty, kb.f32(0.0), kb.div(kb.f32(1.0), l));
        forHeadDim([&](Value c) {
          kb.store(kb.mul(kb.load(acc, block->at(t, {c})), inverse), in.out, in.at(bi, row, hi, c));
        });
        if (in.lse) {
          Value lse = kb.add(kb.load(max, block->at(t, {zero})), kb.log(l));
          kb.store(kb.select(empty, kb.f32(kNegInf), lse), in.lse, {bi, hi, row});
        }
      });
    });
  }

  /// The online-softmax step of one thread's row over the keys of a tile.
  void emitTileUpdate(Value bi, Value hi, Value row, Value k0, Value keyTile, Value valueTile,
                      Value t, Value query, Value acc, Value scores, Value max, Value sum) {
    Value zero = kb.index(0);
    Value tileKeys = kb.index(keysPerTile);
    // Keys the row sees: before seq_k and, when causal, up to the diagonal.
    Value limit = kb.index(seqK);
    if (in.causal)
      limit = kb.mini(limit, kb.addi(row, kb.index(seqK - seqQ + 1)));
    Value tileMax = kb.forLoop(zero, tileKeys, 1, {kb.f32(kNegInf)},
                               [&](Value j, ValueRange carried) -> SmallVector<Value> {
      Value key = kb.addi(k0, j);
      Value dot = kb.forLoop(zero, kb.index(headDim), 1, {kb.f32(0.0)},
                             [&](Value c, ValueRange partial) -> SmallVector<Value> {
        Value product = kb.mul(kb.load(query, block->at(t, {c})), kb.load(keyTile, {j, c}));
        return {kb.add(partial[0], product)};
      })[0];
      Value clamped = kb.mini(key, kb.index(seqK - 1));
      if (in.keyBias)
        dot = kb.add(dot, kb.load(in.keyBias, {bi, clamped}));
      if (in.bias)
        dot = kb.add(dot, kb.load(in.bias, in.biasAt(zero, bi, hi, row, clamped)));
      Value score = kb.select(cmpi(arith::CmpIPredicate::ult, key, limit), dot, kb.f32(kNegInf));
      kb.store(score, scores, block->at(t, {j}));
      return {kb.max(carried[0], score)};
    })[0];
    Value oldMax = kb.load(max, block->at(t, {zero}));
    Value newMax = kb.max(tileMax, oldMax);
    // Nothing visible yet: the state stays as it is.
    Value anything = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::ONE, newMax, kb.f32(kNegInf));
    kb.ifThen(anything, [&] {
      // e^(-inf) computed as 0 without relying on the exponential's range.
      auto expShifted = [&](Value x) {
        return kb.select(isNegInf(x), kb.f32(0.0), kb.exp(kb.sub(x, newMax)));
      };
      Value correction = expShifted(oldMax);
      Value tileSum = kb.forLoop(zero, tileKeys, 1, {kb.f32(0.0)},
                                 [&](Value j, ValueRange partial) -> SmallVector<Value> {
        Value p = expShifted(kb.load(scores, block->at(t, {j})));
        kb.store(p, scores, block->at(t, {j}));
        return {kb.add(partial[0], p)};
      })[0];
      kb.forLoop(zero, kb.index(headDim), 1, [&](Value c) {
        Value start = kb.mul(kb.load(acc, block->at(t, {c})), correction);
        Value total = kb.forLoop(zero, tileKeys, 1, {start},
                                 [&](Value j, ValueRange partial) -> SmallVector<Value> {
          Value p = kb.load(scores, block->at(t, {j}));
          return {kb.add(partial[0], kb.mul(p, kb.load(valueTile, {j, c})))};
        })[0];
        kb.store(total, acc, block->at(t, {c}));
      });
      Value l = kb.load(sum, block->at(t, {zero}));
      kb.store(kb.add(kb.mul(l, correction), tileSum), sum, block->at(t, {zero}));
      kb.store(newMax, max, block->at(t, {zero}));
    });
  }

  KernelBuilder &kb;
  OpBuilder &b;
  Location loc;
  const AttentionOperands &in;
  int64_t batch, heads, seqQ, seqK, headDim, rowsPerBlock, keysPerTile;
  std::optional<ThreadBlockBuilder> block;
};

struct FusedAttentionGpuKernel : OpRewritePattern<FusedAttentionOp> {
  FusedAttentionGpuKernel(MLIRContext *context, bool emulate)
      : OpRewritePattern(context), emulate(emulate) {}

  LogicalResult matchAndRewrite(FusedAttentionOp op, PatternRewriter &rewriter) const override {
    if (!cast<RankedTensorType>(op.getQuery().getType()).getElementType().isF32())
      return rewriter.notifyMatchFailure(op, "the attention kernel is f32");
    // Only the kernel-building helpers of KernelBuilder are used: no vectors.
    CpuTarget scalarTarget;
    KernelBuilder kb(rewriter, op.getLoc(), scalarTarget);
    AttentionOperands in = attentionOperands(kb, op);
    Type f32 = rewriter.getF32Type();
    auto shapeOf = [](Value value) { return cast<RankedTensorType>(value.getType()).getShape(); };
    in.out = kb.allocate(shapeOf(op.getResult()), f32);
    SmallVector<Value> buffers = {in.out};
    if (Value lse = op.getLogsumexp())
      buffers.push_back(in.lse = kb.allocate(shapeOf(lse), f32));
    AttentionKernel(kb, in, emulate).emit();
    rewriter.replaceOp(op, llvm::map_to_vector(buffers, [&](Value buffer) { return kb.asTensor(buffer); }));
    return success();
  }

  bool emulate;
};

struct BarrierMemoryEffects
    : MemoryEffectOpInterface::ExternalModel<BarrierMemoryEffects, gpu::BarrierOp> {
  void getEffects(Operation *,
                  SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>> &effects) const {
    effects.emplace_back(MemoryEffects::Read::get());
    effects.emplace_back(MemoryEffects::Write::get());
  }
};

struct ConvertXfmrToGpuKernelsPass
    : xfmr::impl::ConvertXfmrToGpuKernelsBase<ConvertXfmrToGpuKernelsPass> {
  using Base::Base;
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<FusedAttentionGpuKernel>(&getContext(), emulateThreads);
    GreedyRewriteConfig config;
    config.setStrictness(GreedyRewriteStrictness::ExistingOps);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns), config)))
      signalPassFailure();
  }
};

} // namespace

void xfmr::registerGpuBarrierMemoryEffects(DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *context, gpu::GPUDialect *) {
    gpu::BarrierOp::attachInterface<BarrierMemoryEffects>(*context);
  });
}
