#include "command_line.h"

#include <algorithm>
#include <iostream>
#include <sstream>

#include "build_commit.h"

namespace autotune::cli {
namespace {

constexpr std::size_t kWidestFlagColumn = 36;
constexpr std::size_t kLineWidth = 100;

const Flag* findFlag(const std::vector<Flag>& flags, std::string_view name, bool isShort) {
  const auto found = std::ranges::find_if(flags, [&](const Flag& flag) {
    return isShort ? name.size() == 1 && flag.shortName == name[0] : flag.name == name;
  });
  return found == flags.end() ? nullptr : &*found;
}

// The flag's value: after `=`, else (not for a switch) the next argument.
tl::expected<std::string, std::string> valueOf(const Flag& flag,
                                               const std::optional<std::string>& attached,
                                               const std::vector<std::string>& args,
                                               std::size_t& at) {
  if (flag.valueName.empty()) {
    if (attached && *attached != "true" && *attached != "false") {
      return tl::unexpected("is a switch: true or false, not \"" + *attached + "\"");
    }
    return attached.value_or("true");
  }
  if (attached) {
    return *attached;
  }
  if (at + 1 >= args.size()) {
    return tl::unexpected(std::string("needs a value (") + flag.valueName + ")");
  }
  return args[++at];
}

std::string leftColumn(const Flag& flag) {
  std::string column = flag.shortName != 0 ? std::string("  -") + flag.shortName + ", " : "      ";
  column += "--" + flag.name;
  if (!flag.valueName.empty()) {
    column += " " + flag.valueName;
  }
  return column;
}

}  // namespace

tl::expected<CommandLine, std::string> parseCommandLine(const std::vector<std::string>& args,
                                                        const std::vector<Flag>& flags) {
  CommandLine line;
  bool flagsEnded = false;
  for (std::size_t at = 0; at < args.size(); ++at) {
    const std::string& arg = args[at];
    if (flagsEnded || arg == "-" || !arg.starts_with("-")) {
      line.arguments.push_back(arg);
      continue;
    }
    if (arg == "--") {
      flagsEnded = true;
      continue;
    }
    if (arg == "--help" || arg == "-h") {
      line.help = true;
      return line;
    }
    if (arg == "--version") {
      line.version = true;
      return line;
    }
    // --name, --name=value, -n, -n=value, -nvalue
    const bool isShort = !arg.starts_with("--");
    std::string name = arg.substr(isShort ? 1 : 2);
    std::optional<std::string> attached;
    if (const auto equals = name.find('='); equals != std::string::npos) {
      attached = name.substr(equals + 1);
      name.resize(equals);
    } else if (isShort && name.size() > 1) {
      attached = name.substr(1);
      name.resize(1);
    }
    const Flag* flag = findFlag(flags, name, isShort);
    if (flag == nullptr) {
      return tl::unexpected("unknown flag " + arg.substr(0, arg.find('=')));
    }
    const std::string shown = isShort ? "-" + name : "--" + name;
    auto value = valueOf(*flag, attached, args, at);
    if (!value) {
      return tl::unexpected(shown + ": " + value.error());
    }
    if (auto wrong = flag->set(*value)) {
      return tl::unexpected(shown + ": " + *wrong);
    }
  }
  return line;
}

std::string describeFlags(const std::vector<Flag>& flags) {
  std::size_t width = 0;
  for (const auto& flag : flags) {
    width = std::max(width, std::min(leftColumn(flag).size() + 2, kWidestFlagColumn));
  }
  std::string text;
  for (const auto& flag : flags) {
    std::string line = leftColumn(flag);
    if (line.size() + 2 > width) {
      text += line + "\n";
      line.clear();
    }
    line.resize(width, ' ');
    std::istringstream words(flag.help);
    bool lineEmpty = true;
    for (std::string word; words >> word; lineEmpty = false) {
      if (!lineEmpty && line.size() + 1 + word.size() > kLineWidth) {
        text += line + "\n";
        line.assign(width, ' ');
        lineEmpty = true;
      }
      line += (lineEmpty ? "" : " ") + word;
    }
    text += line + "\n";
  }
  return text;
}

std::string versionLine(std::string_view program) {
  return std::string(program) + " " + AUTOTUNE_VERSION + " (commit " + kBuildCommit + ")\n";
}

Flag jobFileFlag(std::string& file) {
  return {"filename", 'f', "FILE", "the job's file; - for standard input",
          [&file](const std::string& value) {
            file = value;
            return std::optional<std::string>();
          }};
}

std::optional<std::string> oneJobFile(const std::string& flagged,
                                      const std::vector<std::string>& arguments,
                                      std::string_view program, std::string_view verb) {
  const std::size_t given = arguments.size() + (flagged.empty() ? 0 : 1);
  if (given != 1) {
    std::cerr << program << " " << verb << ": "
              << (given == 0 ? "FILE is missing" : "one FILE only, given as -f FILE or FILE")
              << "\nSee '" << program << " " << verb << " --help'.\n";
    return std::nullopt;
  }
  const std::string& file = flagged.empty() ? arguments.front() : flagged;
  // Standard input as a file every reader can open.
  return file == "-" ? "/dev/stdin" : file;
}

std::optional<int> answeredAlone(const tl::expected<CommandLine, std::string>& line,
                                 std::string_view program, std::string_view verb,
                                 std::string_view usage, const std::vector<Flag>& flags) {
  if (!line) {
    std::cerr << program << " " << verb << ": " << line.error() << "\nSee '" << program << " "
              << verb << " --help'.\n";
    return kExitUsage;
  }
  if (line->help) {
    std::cout << usage << (flags.empty() ? "" : "\nFlags:\n" + describeFlags(flags));
    return 0;
  }
  if (line->version) {
    std::cout << versionLine(program);
    return 0;
  }
  return std::nullopt;
}

}  // namespace autotune::cli
