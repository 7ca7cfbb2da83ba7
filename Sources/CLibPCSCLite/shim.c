// SwiftPM needs one source file in a C target; the module is CLibPCSCLite.h.
#include "CLibPCSCLite.h"
