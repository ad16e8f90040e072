// Algorithm ids travel in message headers as hashes; this table turns them
// back into names for error messages. Every registered algorithm adds itself.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace tutti {

void remember_algorithm_name(std::string_view name);
std::string algorithm_name(std::uint32_t id);

} // namespace tutti
