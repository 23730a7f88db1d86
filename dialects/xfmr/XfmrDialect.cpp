//===- XfmrDialect.cpp - the xfmr dialect -----------------------*- C++ -*-===//

#include "xfmr/Dialect/XfmrDialect.h"

#include "mlir/IR/DialectImplementation.h"
#include "xfmr/Dialect/XfmrOps.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace xfmr;

#include "xfmr/XfmrDialect.cpp.inc"
#include "xfmr/XfmrEnums.cpp.inc"
#include "xfmr/XfmrInterfaces.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "xfmr/XfmrAttrs.cpp.inc"

void XfmrDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "xfmr/XfmrOps.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "xfmr/XfmrAttrs.cpp.inc"
      >();
}
