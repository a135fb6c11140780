// The few pieces of S3's XML answers the store reads: the text of <Tag> elements, with entities decoded.
#pragma once

#include <string>
#include <vector>

namespace composer::detail {

/// The text of every <tag>...</tag> in `xml`, in order (no nesting of the same tag).
std::vector<std::string> xml_values(const std::string& xml, const std::string& tag);
/// The first one, or "" when there is none.
std::string xml_value(const std::string& xml, const std::string& tag);
/// Escapes &, <, >, " for an element's text.
std::string xml_escape(const std::string& text);

}  // namespace composer::detail
