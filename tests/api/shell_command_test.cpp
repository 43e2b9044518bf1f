// Reading training commands wrapped in a shell: where the script is, whether it passes its
// arguments on, and whether it sets a flag itself.

#include "api/shell_command.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

namespace autotune::api {
namespace {

using Argv = std::vector<std::string>;

TEST(ShellScriptIndex, FindsTheScriptOfAShellGivenDashC) {
  EXPECT_EQ(shellScriptIndex(Argv{"bash", "-c", "python train.py"}), 2U);
  EXPECT_EQ(shellScriptIndex(Argv{"/bin/sh", "-ec", "python train.py", "train"}), 2U);
  EXPECT_EQ(shellScriptIndex(Argv{"/usr/bin/env", "bash", "-lc", "python train.py"}), 3U);
  EXPECT_EQ(shellScriptIndex(Argv{"env", "-i", "A=1", "zsh", "-c", "x"}), 5U);
  EXPECT_EQ(shellScriptIndex(Argv{"env", "-u", "HOME", "bash", "-c", "x"}), 5U)
      << "-u takes the name it unsets";
  EXPECT_EQ(shellScriptIndex(Argv{"env", "-C", "/workspace", "--unset", "TMP", "sh", "-c", "x"}),
            7U);
  EXPECT_EQ(shellScriptIndex(Argv{"bash", "-o", "pipefail", "-c", "x"}), 4U);
  EXPECT_EQ(shellScriptIndex(Argv{"bash", "-c", "--", "x"}), 3U);
}

TEST(ShellScriptIndex, NothingForOtherCommands) {
  EXPECT_EQ(shellScriptIndex(Argv{"python", "-c", "print(1)"}), std::nullopt);
  EXPECT_EQ(shellScriptIndex(Argv{"bash", "train.sh"}), std::nullopt) << "a script file";
  EXPECT_EQ(shellScriptIndex(Argv{"bash", "-c"}), std::nullopt) << "no script given";
  EXPECT_EQ(shellScriptIndex(Argv{"bash", "--norc", "train.sh"}), std::nullopt);
  EXPECT_EQ(shellScriptIndex(Argv{}), std::nullopt);
  EXPECT_EQ(shellScriptIndex(Argv{"deepspeed", "train.py", "-c", "x"}), std::nullopt);
}

TEST(ForwardsArguments, SeesDollarAtOrStarQuotedOrBraced) {
  EXPECT_TRUE(forwardsArguments(R"(python train.py "$@")"));
  EXPECT_TRUE(forwardsArguments("exec python train.py ${@}"));
  EXPECT_TRUE(forwardsArguments(R"(echo "$*" > /out/args)"));
  EXPECT_FALSE(forwardsArguments("python train.py $1 $2"));
}

TEST(SetsFlag, OnlyAsAWordOfItsOwn) {
  EXPECT_TRUE(
      setsFlag("python t.py --per_device_train_batch_size 1", "--per_device_train_batch_size"));
  EXPECT_TRUE(
      setsFlag("python t.py --per_device_train_batch_size=1", "--per_device_train_batch_size"));
  EXPECT_TRUE(setsFlag("python t.py '--bs' 1", "--bs"));
  EXPECT_FALSE(
      setsFlag("python t.py --per_device_train_batch_size_x 1", "--per_device_train_batch_size"));
  EXPECT_FALSE(setsFlag("python t.py --x--bs 1", "--bs"));
  EXPECT_FALSE(setsFlag("python t.py", "--bs"));
}

}  // namespace
}  // namespace autotune::api
