#include "libcore/api/vni.hpp"

#include "libcore/api/json_read.hpp"

namespace kc::api {

using nlohmann::json;

std::string vniObjectName(const std::string& ownerUid) {
  return "vni-" + ownerUid;
}

json toJson(const VniObject& o) {
  return json{
      {"apiVersion", kVniApiVersion},
      {"kind", kVniKind},
      {"metadata",
       {{"name", o.name}, {"namespace", o.ns}, {"labels", {{kVniOwnerUidLabel, o.ownerUid}}}}},
      {"spec", {{"vni", o.vni.value_or(0)}}}};
}

VniObject parseVniObject(const json& object) {
  VniObject o;
  if (!object.is_object()) {
    return o;
  }
  if (const auto m = object.find("metadata"); m != object.end() && m->is_object()) {
    o.name = detail::text(*m, "name");
    o.ns = detail::text(*m, "namespace");
    if (const auto l = m->find("labels"); l != m->end() && l->is_object()) {
      o.ownerUid = detail::text(*l, std::string(kVniOwnerUidLabel).c_str());
    }
  }
  if (const auto s = object.find("spec"); s != object.end() && s->is_object()) {
    if (const auto n = s->find("vni"); n != s->end() && n->is_number_integer()) {
      const auto v = n->get<std::int64_t>();
      if (v > 0 && v <= static_cast<std::int64_t>(kMaxVni)) {
        o.vni = static_cast<std::uint32_t>(v);
      }
    }
  }
  return o;
}

}  // namespace kc::api
