/* volk's loader implementation, compiled into libvkattn with hidden
 * visibility so it never clashes with a host application's own volk. */
#include <volk.c>
