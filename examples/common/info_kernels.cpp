// vkattn-info's view of the device table (info_kernels.h).
#include "common/info_kernels.h"

#include <iterator>
#include <string>

#include "common/kernel_choice.h"

extern "C" const char* vkattn_info_table_row(vkattn_context* ctx) {
  static std::string row;
  row = vkattn_tools::device_table_row(ctx);
  return row.c_str();
}

extern "C" uint32_t vkattn_info_shape_count(void) {
  return static_cast<uint32_t>(std::size(vkattn_tools::kReportShapes));
}

extern "C" const char* vkattn_info_shape_name(uint32_t i) {
  return vkattn_tools::kReportShapes[i].what;
}

extern "C" const char* vkattn_info_shape_kernel(vkattn_context* ctx, uint32_t i) {
  static std::string kernel;
  const vkattn_tools::ReportShape& s = vkattn_tools::kReportShapes[i];
  kernel = vkattn_tools::kernel_choice(ctx, s.d, s.d, s.rows, s.group);
  return kernel.c_str();
}
