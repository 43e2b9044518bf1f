#pragma once
// Command lines read by the conventions of kubectl and POSIX tools, for the three programs:
// `--name value` and `--name=value`, a short `-n value`, switches as `--name` or `--name=false`,
// `--` ending the flags, and `--help`/`-h` and `--version` wherever they stand.

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <tl/expected.hpp>
#include <vector>

namespace autotune::cli {

// What every program exits with when its command line is wrong.
inline constexpr int kExitUsage = 2;

struct Flag {
  std::string name;       // the long form, without its dashes: "namespace"
  char shortName = 0;     // 'n' for -n, or 0
  std::string valueName;  // "NS" in the usage; empty for a switch
  std::string help;       // the usage's words, lines after the first indented by the caller
  // Takes the value ("true" or "false" for a switch); an error says why it is wrong, without the
  // flag's name, which the parser adds.
  std::function<std::optional<std::string>(const std::string& value)> set;
};

struct CommandLine {
  std::vector<std::string> arguments;  // what is not a flag, in order
  bool help = false;
  bool version = false;
};

// Every flag given to its setter; the first mistake (an unknown flag, a missing or wrong value)
// as "--name: why". `-` alone is an argument: standard input.
tl::expected<CommandLine, std::string> parseCommandLine(const std::vector<std::string>& args,
                                                        const std::vector<Flag>& flags);

// "  -n, --namespace NS   the namespace..." for each flag, aligned.
std::string describeFlags(const std::vector<Flag>& flags);

// "autotune 0.1.0 (commit 9bf7d78a1b2c)\n".
std::string versionLine(std::string_view program);

// -f, --filename FILE: the job's file, - for standard input.
Flag jobFileFlag(std::string& file);

// The one job file a verb reads: given with -f or as its one argument; a path to open (standard
// input's for -). Nothing after saying on standard error what is wrong.
std::optional<std::string> oneJobFile(const std::string& flagged,
                                      const std::vector<std::string>& arguments,
                                      std::string_view program, std::string_view verb);

// A verb's command line read: its usage (`usage`, then the flags) on standard output for --help,
// the version for --version (both: 0); the mistake and where to read more on standard error (2).
// Nothing when the verb is to go on with the line's arguments.
std::optional<int> answeredAlone(const tl::expected<CommandLine, std::string>& line,
                                 std::string_view program, std::string_view verb,
                                 std::string_view usage, const std::vector<Flag>& flags);

}  // namespace autotune::cli
