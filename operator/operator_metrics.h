#pragma once
// What the operator's parts report, turned into metrics and log lines: the reconciler's trials,
// the manager's reconciles, watches and leadership, the event sender's failures, and the gauges
// read from the cache.

#include "controller/apply/apply.h"
#include "controller/apply/event_sender.h"
#include "controller/cache/cluster.h"
#include "observability/log.h"
#include "observability/metrics.h"
#include "runtime/manager.h"

namespace autotune::wiring {

controller::ReconcilerHooks reconcilerHooks(observability::Metrics& metrics);

// The cluster gauges are refreshed after every reconcile.
runtime::ManagerHooks managerHooks(observability::Metrics& metrics,
                                   const observability::Logger& log,
                                   const runtime::Manager& manager,
                                   const controller::Cluster& cluster);

controller::EventSenderHooks eventSenderHooks(observability::Metrics& metrics,
                                              const observability::Logger& log,
                                              const controller::Cluster& cluster);

// Every watch's restart series, at 0 until a restart happens, so that dashboards show them.
void declareWatches(observability::Metrics& metrics, bool kueue);

// The per-job gauges, read from the cache's jobs at each scrape.
void readJobFiguresFrom(const controller::Cluster& cluster, observability::Metrics& metrics);

}  // namespace autotune::wiring
