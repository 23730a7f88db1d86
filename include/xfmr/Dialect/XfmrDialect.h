//===- XfmrDialect.h - the xfmr dialect -------------------------*- C++ -*-===//

#ifndef XFMR_DIALECT_XFMRDIALECT_H
#define XFMR_DIALECT_XFMRDIALECT_H

#include "mlir/IR/Dialect.h"

#include "xfmr/XfmrDialect.h.inc"

#endif // XFMR_DIALECT_XFMRDIALECT_H
