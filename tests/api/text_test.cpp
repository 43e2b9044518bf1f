// Outside text made fit for the API's string fields: valid UTF-8, cut between characters.

#include "api/text.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

namespace autotune::api {
namespace {

const std::string kBlock = "\xE2\x96\x88";        // U+2588, a progress bar's block
const std::string kReplacement = "\xEF\xBF\xBD";  // U+FFFD

TEST(ValidUtf8, KeepsWellFormedTextAsItIs) {
  const std::string text = "loss 0.25 " + kBlock + " ünïcode \xF0\x9F\x9A\x80";
  EXPECT_EQ(validUtf8(text), text);
}

TEST(ValidUtf8, ReplacesEachByteThatIsNoCharacter) {
  EXPECT_EQ(validUtf8("a\xFF"
                      "b"),
            "a" + kReplacement + "b");
  EXPECT_EQ(validUtf8("\x96\x88"
                      "x"),
            kReplacement + kReplacement + "x");  // a cut character
  EXPECT_EQ(validUtf8("x\xE2\x96"), "x" + kReplacement + kReplacement);
  EXPECT_EQ(validUtf8("\xC0\xAF"), kReplacement + kReplacement);                     // overlong '/'
  EXPECT_EQ(validUtf8("\xED\xA0\x80"), kReplacement + kReplacement + kReplacement);  // surrogate
  EXPECT_EQ(validUtf8("\xF4\x90\x80\x80").size(), 4 * kReplacement.size());  // past U+10FFFF
}

TEST(ValidUtf8, WhatItReturnsSerialisesAsJson) {
  std::string bytes;
  for (int byte = 0; byte < 256; ++byte) {
    bytes += static_cast<char>(byte);
  }
  EXPECT_NO_THROW((void)nlohmann::json(validUtf8(bytes + bytes)).dump());
}

TEST(HeadAndTailOf, CutBetweenCharactersWithinTheBound) {
  std::string bar;
  for (int i = 0; i < 10; ++i) {
    bar += kBlock;
  }
  for (std::size_t bound = 0; bound <= bar.size() + 1; ++bound) {
    const std::string head = headOf(bar, bound);
    const std::string tail = tailOf(bar, bound);
    EXPECT_LE(head.size(), bound);
    EXPECT_LE(tail.size(), bound);
    EXPECT_EQ(head.size() % kBlock.size(), 0U) << bound;
    EXPECT_EQ(tail.size(), head.size()) << bound;
    EXPECT_EQ(validUtf8(head), head);
    EXPECT_EQ(validUtf8(tail), tail);
  }
  EXPECT_EQ(headOf("abc", 2), "ab");
  EXPECT_EQ(tailOf("abc", 2), "bc");
}

}  // namespace
}  // namespace autotune::api
