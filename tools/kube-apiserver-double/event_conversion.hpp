#pragma once
// Events are ONE resource served by two groups, as on the real server (one etcd resource,
// core/v1 the storage form): events.k8s.io/v1 is a view of the stored core/v1 events with
// renamed fields. An event written through either group is read, listed and watched
// through both; `kubectl events` and `kubectl describe` (core/v1 readers) see events a
// controller wrote through events.k8s.io/v1.
//
// Field pairs (events.k8s.io/v1 <-> core/v1): regarding <-> involvedObject, note <-> message,
// reportingController <-> reportingComponent, deprecatedSource <-> source,
// deprecatedFirstTimestamp <-> firstTimestamp, deprecatedLastTimestamp <-> lastTimestamp,
// deprecatedCount <-> count. metadata, reason, type, eventTime, series, action, related and
// reportingInstance keep their names.

#include <nlohmann/json.hpp>
#include <string>

namespace kc::apiserver {

// An events.k8s.io/v1 Event as its core/v1 (storage) form, apiVersion v1.
nlohmann::json coreEventFromEventsV1(const nlohmann::json& event);
// A stored core/v1 Event as events.k8s.io/v1, apiVersion events.k8s.io/v1.
nlohmann::json eventsV1FromCoreEvent(const nlohmann::json& event);

// The events.k8s.io/v1 create checks (eventTime, reportingController, reportingInstance,
// action and reason required; type Normal or Warning). Throws the 422 ApiError.
void validateEventsV1Create(const nlohmann::json& event);

// An events.k8s.io/v1 field selector in core/v1 terms ("regarding.name=x,reportingController=c"
// -> "involvedObject.name=x,reportingComponent=c"). The labels must already be valid.
std::string coreEventFieldSelector(const std::string& selector);

}  // namespace kc::apiserver
