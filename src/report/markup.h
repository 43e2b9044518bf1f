#pragma once
// Internal to the report library: text and numbers as HTML and SVG take them, and the scales
// that place values on a drawing.

#include <string>
#include <string_view>
#include <vector>

namespace autotune::report::markup {

// Any text as character data or an attribute value, in HTML and in SVG (XML) alike: &, <, >, "
// and ' as references, invalid UTF-8 and control characters (but newline and tab) as U+FFFD.
// Whatever the results hold, it reads as text and never as markup.
std::string escape(std::string_view text);

// An attribute of an element; its value is escaped where it is written.
struct Attribute {
  std::string_view name;
  std::string value;
};
using Attributes = std::vector<Attribute>;

// <name a="v" ...>content</name>, `content` being markup already.
std::string element(std::string_view name, const Attributes& attributes, std::string_view content);

// <name a="v" ...>text</name>, the text escaped.
std::string textElement(std::string_view name, const Attributes& attributes, std::string_view text);

// <name a="v" .../>
std::string emptyElement(std::string_view name, const Attributes& attributes);

// An SVG <text> at (x, y) of class `classes`, anchored at `anchor` (SVG's own default, "start",
// and an empty class are left unwritten); the content escaped.
std::string svgText(double x, double y, std::string_view content, std::string_view classes = "",
                    std::string_view anchor = "start");

// Every figure of the report is this wide, with this margin, so that they line up on the page.
inline constexpr double kFigureWidth = 960;
inline constexpr double kFigureMargin = 16;

// A figure: an <svg> of class `className`, kFigureWidth wide and `height` high, labelled for
// screen readers by `label`, holding `content` (markup already).
std::string figure(std::string_view className, double height, const std::string& label,
                   std::string_view content);

// At most `limit` characters (code points), a cut one ending in "…"; not escaped.
std::string shortened(std::string_view text, std::size_t limit);

// The last line that holds anything: for a crash, usually the error that ended it.
std::string lastLine(std::string_view text);

// A duration for people: "0.228 s", "12.5 min", "3.2 h".
std::string duration(double seconds);

// A coordinate with at most two decimals: "12.5".
std::string number(double value);

// A tick label: whole numbers as they are, others with three significant digits.
std::string tickLabel(double value);

// 1, 2 or 5 times a power of ten, the smallest at least `rough`.
double niceStep(double rough);

// Places a value of [low, high] on [from, to] (pixels), on a linear or a base-2 logarithmic axis.
class Scale {
 public:
  Scale(double low, double high, double from, double to, bool logarithmic = false);

  double at(double value) const;
  double low() const { return low_; }
  double high() const { return high_; }
  bool logarithmic() const { return logarithmic_; }
  // Round values within the domain: about `count` of them, or the powers of two on a log axis.
  std::vector<double> ticks(int count, bool wholeNumbers) const;

 private:
  double low_;
  double high_;
  double from_;
  double to_;
  bool logarithmic_;
};

}  // namespace autotune::report::markup
