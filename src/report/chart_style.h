#pragma once
// The chart's look: its style sheet, and the hatching that marks what was pruned. The hatching's id
// begins with `idPrefix`, so that each of several charts on one page has its own.

#include <string>
#include <string_view>

namespace autotune::report {

std::string chartStyle(std::string_view idPrefix);

}  // namespace autotune::report
