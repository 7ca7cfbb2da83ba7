// Forwards pcsclite.h's <wintypes.h> to the real header (see CLibPCSCLite.h).
#include <PCSC/wintypes.h>
