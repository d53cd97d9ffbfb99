// vkattn-info's kernel report (info_kernels.h).
#include "common/info_kernels.h"

#include <cstdio>
#include <string>

#include "common/kernel_choice.h"

namespace {

std::string json_string(const std::string& s) {
  std::string o = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      o += '\\';
      o += static_cast<char>(c);
    } else if (c == '\n') {
      o += "\\n";
    } else if (c < 0x20) {
      char b[8];
      std::snprintf(b, sizeof(b), "\\u%04x", c);
      o += b;
    } else {
      o += static_cast<char>(c);
    }
  }
  return o + "\"";
}

}  // namespace

extern "C" void vkattn_info_print_kernels(vkattn_context* ctx, int json) {
  const std::string row = vkattn_tools::device_table_row(ctx);
  if (!json) {
    std::printf("%s", row.c_str());
    for (const vkattn_tools::ReportShape& s : vkattn_tools::kReportShapes)
      std::printf("  %-44s %s\n", s.what, vkattn_tools::kernel_choice(ctx, s.d, s.rows).c_str());
    return;
  }
  std::printf("{\"row\": %s, \"shapes\": [", json_string(row).c_str());
  bool first = true;
  for (const vkattn_tools::ReportShape& s : vkattn_tools::kReportShapes) {
    std::printf("%s{\"shape\": %s, \"kernel\": %s}", first ? "" : ", ", json_string(s.what).c_str(),
                json_string(vkattn_tools::kernel_choice(ctx, s.d, s.rows)).c_str());
    first = false;
  }
  std::printf("]}");
}
