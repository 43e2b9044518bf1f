#pragma once
// Training commands wrapped in a shell, as launch scripts are: `bash -c 'python train.py ...'`.
// The flags spec.argMappings passes cannot be put inside the script's text; after it they are the
// script's positional parameters, which reach the training program only if the script forwards
// them ("$@"). Validation and the trial protocol read a command alike through this.

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace autotune::api {

// Where the script of `SHELL [OPTIONS] -c SCRIPT [NAME [ARG...]]` is in `argv`: a shell (sh,
// bash, dash, ash, ksh or zsh, by any path, also through `env`) given -c, alone or among other
// short options (-ec, -lc). Nothing for any other command.
std::optional<std::size_t> shellScriptIndex(const std::vector<std::string>& argv);

// Whether a script passes on its positional parameters: "$@" or ${@} (quoted or not), or all
// of them as one word, "$*".
bool forwardsArguments(std::string_view script);

// Whether `flag` stands in the script as a word of its own (--flag 1, --flag=1), as a mapped flag
// the script sets itself.
bool setsFlag(std::string_view script, std::string_view flag);

}  // namespace autotune::api
