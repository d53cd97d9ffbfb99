/* volk for tests that make their own Vulkan instance and device (as an
 * engine would); libvkattn's own volk is hidden inside the library. */
#include <volk.c>
