#pragma once
// Internal to the api library: each API struct's fields are declared once, in a describe()
// function (codec.cpp) that names every field's JSON key, its member and when it is written out.
// Two walkers run over those declarations: Decoder reads a JSON object into the struct with every
// problem recorded, Encoder writes the struct back. A field added to describe() is decoded and
// encoded alike.

#include <concepts>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "api/codec.h"
#include "api/fields.h"
#include "api/job.h"
#include "api/units.h"

namespace autotune::api::schema {

using nlohmann::json;

// When a field is written out. Every field is read when present.
enum class Write {
  kAlways,
  kUnlessEmpty,  // an empty string, list, map or object is left out
};

// How one JSON value becomes a T (a fields:: converter) and back.
template <typename T>
struct Codec;

template <>
struct Codec<int> {
  static constexpr auto decode = fields::asInt;
  static json encode(int value) { return value; }
};
template <>
struct Codec<std::int64_t> {
  static constexpr auto decode = fields::asInt64;
  static json encode(std::int64_t value) { return value; }
};
template <>
struct Codec<double> {
  static constexpr auto decode = fields::asDouble;
  static json encode(double value) { return value; }
};
template <>
struct Codec<bool> {
  static constexpr auto decode = fields::asBool;
  static json encode(bool value) { return value; }
};
template <>
struct Codec<std::string> {
  static constexpr auto decode = fields::asString;
  static json encode(const std::string& value) { return value; }
};
// Free-form JSON (the DeepSpeed config, the Pod template), which validation checks.
template <>
struct Codec<json> {
  static constexpr auto decode = fields::asAny;
  static json encode(const json& value) { return value; }
};
template <>
struct Codec<Quantity> {
  static constexpr auto decode = fields::asQuantity;
  static json encode(const Quantity& value) { return value.text(); }
};
template <>
struct Codec<Duration> {
  static constexpr auto decode = fields::asDuration;
  static json encode(const Duration& value) { return value.text(); }
};
template <>
struct Codec<std::map<std::string, std::string>> {
  static constexpr auto decode = fields::asStringMap;
  static json encode(const std::map<std::string, std::string>& value) { return value; }
};
template <>
struct Codec<std::map<std::string, double>> {
  static constexpr auto decode = fields::asNumberMap;
  static json encode(const std::map<std::string, double>& value) { return value; }
};

template <typename Enum>
struct EnumCodec {
  static json encode(Enum value) { return std::string(toString(value)); }
};
template <>
struct Codec<Strategy> : EnumCodec<Strategy> {
  static constexpr auto decode = fields::asStrategy;
};
template <>
struct Codec<Metric> : EnumCodec<Metric> {
  static constexpr auto decode = fields::asMetric;
};
template <>
struct Codec<Cleanup> : EnumCodec<Cleanup> {
  static constexpr auto decode = fields::asCleanup;
};
template <>
struct Codec<Reuse> : EnumCodec<Reuse> {
  static constexpr auto decode = fields::asReuse;
};
template <>
struct Codec<Phase> : EnumCodec<Phase> {
  static constexpr auto decode = fields::asPhase;
};
template <>
struct Codec<Outcome> : EnumCodec<Outcome> {
  static constexpr auto decode = fields::asOutcome;
};

// `Object`, const or not: lets one describe() serve the decoder and the encoder.
template <typename T, typename Object>
concept Either = std::same_as<std::remove_const_t<T>, Object>;

template <typename T>
struct IsOptional : std::false_type {};
template <typename T>
struct IsOptional<std::optional<T>> : std::true_type {};

template <typename T>
struct IsList : std::false_type {};
template <typename T>
struct IsList<std::vector<T>> : std::true_type {};

class Decoder;

// A struct with a describe() of its own fields: it is read as a nested object.
template <typename T>
concept Described = requires(Decoder& decoder, T& object) {
  describe(decoder, object);
};

template <typename T>
concept OptionalDescribed = IsOptional<T>::value && Described<typename T::value_type>;

class Decoder {
 public:
  explicit Decoder(fields::ObjectReader& reader) : reader_(reader) {}

  template <typename T>
  void operator()(std::string_view key, T& member, Write /*when*/ = Write::kAlways) {
    if constexpr (Described<T>) {
      reader_.readSection(key, [&](fields::ObjectReader& section) { into(section, member); });
    } else if constexpr (OptionalDescribed<T>) {
      reader_.readSection(key,
                          [&](fields::ObjectReader& section) { into(section, member.emplace()); });
    } else if constexpr (IsList<T>::value) {
      reader_.readList(key, member,
                       [](fields::ObjectReader& item, auto& object) { into(item, object); });
    } else if constexpr (IsOptional<T>::value) {
      reader_.read(key, member, Codec<typename T::value_type>::decode);
    } else {
      reader_.read(key, member, Codec<T>::decode);
    }
  }

  // A field read with a converter of its own (a JSON value that must be an object, say).
  template <typename T, typename Convert>
  void operator()(std::string_view key, T& member, Write /*when*/, Convert convert) {
    reader_.read(key, member, convert);
  }

  template <typename T>
  static void into(fields::ObjectReader& reader, T& object) {
    Decoder decoder(reader);
    describe(decoder, object);
  }

 private:
  fields::ObjectReader& reader_;
};

class Encoder {
 public:
  explicit Encoder(json& out) : out_(out) {}

  template <typename T>
  void operator()(std::string_view key, const T& member, Write when = Write::kAlways) {
    if constexpr (IsOptional<T>::value) {
      if (member) {
        put(key, value(*member), when);
      }
    } else {
      put(key, value(member), when);
    }
  }

  // A converter of its own only checks what is read: the value is written as any other.
  template <typename T, typename Convert>
  void operator()(std::string_view key, const T& member, Write when, Convert /*convert*/) {
    (*this)(key, member, when);
  }

  template <typename T>
  static json value(const T& member) {
    if constexpr (Described<T>) {
      json out = json::object();
      Encoder encoder(out);
      describe(encoder, member);
      return out;
    } else if constexpr (IsList<T>::value) {
      json out = json::array();
      for (const auto& item : member) {
        out.push_back(value(item));
      }
      return out;
    } else {
      return Codec<T>::encode(member);
    }
  }

 private:
  void put(std::string_view key, json encoded, Write when) {
    // (json::empty() is false for every string)
    const bool empty = encoded.is_string()
                           ? encoded.get_ref<const std::string&>().empty()
                           : (encoded.is_array() || encoded.is_object()) && encoded.empty();
    if (when == Write::kAlways || !empty) {
      out_[std::string(key)] = std::move(encoded);
    }
  }

  json& out_;
};

}  // namespace autotune::api::schema
