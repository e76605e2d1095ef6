#include "engine/output_text.h"

#include <gtest/gtest.h>

namespace mx {
namespace {

TEST(OutputText, ReleasesTextWithoutStops) {
  OutputText t({});
  EXPECT_FALSE(t.append("he"));
  EXPECT_EQ(t.take_ready(), "he");
  EXPECT_FALSE(t.append("llo"));
  EXPECT_EQ(t.take_ready(), "llo");
  EXPECT_EQ(t.take_rest(), "");
}

TEST(OutputText, MatchesStopAcrossTokenBoundaries) {
  OutputText t({"STOP"});
  EXPECT_FALSE(t.append("abcS"));
  EXPECT_EQ(t.take_ready(), "abc");  // "S" may start the stop string: held back
  EXPECT_FALSE(t.append("T"));
  EXPECT_EQ(t.take_ready(), "");
  EXPECT_TRUE(t.append("OPxyz"));
  EXPECT_EQ(t.take_ready(), "");
  EXPECT_EQ(t.take_rest(), "");
  EXPECT_EQ(t.text(), "abc");
  EXPECT_EQ(t.matched_stop(), "STOP");
}

TEST(OutputText, ReleasesHeldTextWhenThePrefixBreaks) {
  OutputText t({"STOP"});
  t.append("xST");
  EXPECT_EQ(t.take_ready(), "x");
  t.append("ART");
  EXPECT_EQ(t.take_ready(), "START");
}

TEST(OutputText, EarliestOfSeveralStopsWins) {
  OutputText t({"cd", "b"});
  EXPECT_TRUE(t.append("abcd"));
  EXPECT_EQ(t.take_rest(), "a");
  EXPECT_EQ(t.matched_stop(), "b");
}

TEST(OutputText, HoldsBackIncompleteUtf8) {
  OutputText t({});
  t.append("a\xe4\xbd");  // "a" + first two bytes of U+4F60
  EXPECT_EQ(t.take_ready(), "a");
  t.append("\xa0");
  EXPECT_EQ(t.take_ready(), "\xe4\xbd\xa0");
}

TEST(OutputText, SanitizesInvalidUtf8) {
  EXPECT_EQ(sanitize_utf8("a\xff" "b"), "a\xef\xbf\xbd" "b");
  EXPECT_EQ(sanitize_utf8("\xe4\xbd"), "\xef\xbf\xbd\xef\xbf\xbd");
  EXPECT_EQ(complete_utf8_prefix("ab\xe4\xbd"), 2u);
}

}  // namespace
}  // namespace mx
