#include "report/markup.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace {

using autotune::report::markup::element;
using autotune::report::markup::emptyElement;
using autotune::report::markup::escape;
using autotune::report::markup::lastLine;
using autotune::report::markup::niceStep;
using autotune::report::markup::number;
using autotune::report::markup::Scale;
using autotune::report::markup::shortened;
using autotune::report::markup::textElement;

TEST(Markup, MarkupInTextIsEscaped) {
  EXPECT_EQ(escape("<script>alert('x') && \"y\"</script>"),
            "&lt;script&gt;alert(&#39;x&#39;) &amp;&amp; &quot;y&quot;&lt;/script&gt;");
  EXPECT_EQ(escape("z1_gas1_tmbspg3"), "z1_gas1_tmbspg3");
}

TEST(Markup, WhatXmlCannotHoldBecomesAReplacementCharacter) {
  const std::string replacement = "\xEF\xBF\xBD";
  EXPECT_EQ(escape("a\x01z"), "a" + replacement + "z");
  EXPECT_EQ(escape("line\r\nnext\ttab"), "line\nnext\ttab");
  EXPECT_EQ(escape("bad \xFF byte"), "bad " + replacement + " byte");
  EXPECT_EQ(escape("cut \xE2\x89"), "cut " + replacement + replacement);
  EXPECT_EQ(escape("overlong \xC0\xAF"), "overlong " + replacement + replacement);
  EXPECT_EQ(escape("surrogate \xED\xA0\x80"),
            "surrogate " + replacement + replacement + replacement);
  EXPECT_EQ(escape("kept \xE2\x89\xA4 \xF0\x9F\x98\x80"), "kept \xE2\x89\xA4 \xF0\x9F\x98\x80");
}

TEST(Markup, AttributeValuesAreEscapedAndContentIsNot) {
  EXPECT_EQ(textElement("text", {{"data-trial", "a\"b<c>"}}, "<b>"),
            "<text data-trial=\"a&quot;b&lt;c&gt;\">&lt;b&gt;</text>");
  EXPECT_EQ(element("g", {}, "<rect/>"), "<g><rect/></g>");
  EXPECT_EQ(emptyElement("rect", {{"x", "1"}, {"y", "2"}}), "<rect x=\"1\" y=\"2\"/>");
}

TEST(Markup, ShortenedCountsCharactersNotBytes) {
  EXPECT_EQ(shortened("abcdef", 6), "abcdef");
  EXPECT_EQ(shortened("abcdefg", 6), "abcde\xE2\x80\xA6");
  EXPECT_EQ(shortened("\xC3\xA9\xC3\xA9\xC3\xA9", 3), "\xC3\xA9\xC3\xA9\xC3\xA9");
  EXPECT_EQ(shortened("\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9", 3), "\xC3\xA9\xC3\xA9\xE2\x80\xA6");
}

TEST(Markup, TheLastLineIsTheOneThatSaysSomething) {
  EXPECT_EQ(lastLine("Traceback\n  ...\nRuntimeError: boom\n\n"), "RuntimeError: boom");
  EXPECT_EQ(lastLine("one line"), "one line");
  EXPECT_EQ(lastLine("\n \n"), "");
}

TEST(Markup, NumbersKeepWhatMatters) {
  EXPECT_EQ(number(12.5), "12.5");
  EXPECT_EQ(number(3), "3");
  EXPECT_EQ(number(1.0 / 3), "0.33");
  EXPECT_EQ(number(-0.001), "0");
}

TEST(Markup, ScalesPlaceValuesAndPickRoundTicks) {
  const Scale linear(0, 10, 100, 200);
  EXPECT_DOUBLE_EQ(linear.at(5), 150);
  EXPECT_DOUBLE_EQ(linear.at(20), 200) << "values outside the domain stay on the drawing";
  EXPECT_EQ(linear.ticks(5, false), (std::vector<double>{0, 2, 4, 6, 8, 10}));

  const Scale upsideDown(0, 100, 200, 0);
  EXPECT_DOUBLE_EQ(upsideDown.at(25), 150);

  const Scale logarithmic(1, 64, 0, 60, true);
  EXPECT_DOUBLE_EQ(logarithmic.at(8), 30);
  EXPECT_EQ(logarithmic.ticks(5, true), (std::vector<double>{1, 2, 4, 8, 16, 32, 64}));

  const Scale microBatches(0.5, 4.5, 0, 100);
  EXPECT_EQ(microBatches.ticks(10, true), (std::vector<double>{1, 2, 3, 4}));

  EXPECT_EQ(niceStep(0.7), 1);
  EXPECT_EQ(niceStep(1.3), 2);
  EXPECT_EQ(niceStep(3), 5);
  EXPECT_EQ(niceStep(70), 100);
  EXPECT_EQ(niceStep(0), 1);
}

}  // namespace
