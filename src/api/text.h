#pragma once
// Text from outside (trial logs, termination messages, exception messages) made fit for the
// API's string fields: valid UTF-8, and cut only between characters. A string field holding
// invalid UTF-8 cannot be serialised to JSON, and a cut through a multi-byte character makes
// invalid UTF-8 of valid text.

#include <cstddef>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace autotune::api {

// `text` with every byte that does not belong to a well-formed UTF-8 character replaced by
// U+FFFD, the replacement character.
std::string validUtf8(std::string_view text);

// How many bytes from the start of `text` are well-formed UTF-8: text.size() when all are.
std::size_t validUtf8Prefix(std::string_view text);

// The longest run of whole characters of validUtf8(text) from its start that fits in maxBytes.
std::string headOf(std::string_view text, std::size_t maxBytes);

// The same from its end.
std::string tailOf(std::string_view text, std::size_t maxBytes);

// validUtf8(text) as one line: every control character (newline, carriage return, tab, a
// terminal's escape) becomes a space. Its JSON form needs no escapes but for '"' and '\\'.
std::string oneLine(std::string_view text);

// The whole of the file at `path`, byte for byte, or nothing when it cannot be read.
std::optional<std::string> readText(const std::filesystem::path& path);

}  // namespace autotune::api
