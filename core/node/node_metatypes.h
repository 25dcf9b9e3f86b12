// Qt metatypes of the node's report structs, so they travel through queued signals.
#pragma once

#include "core/node/node_reports.h"

#include <QMetaType>

Q_DECLARE_METATYPE(es::node::StepReport)
Q_DECLARE_METATYPE(es::node::RoundSummary)
Q_DECLARE_METATYPE(es::node::SwarmView)
Q_DECLARE_METATYPE(es::node::RunInfo)
