/* check.h — forwards to the shared harness, tests/common/check.h, for the
 * tests that still include it by this name. */
#include "../common/check.h"
