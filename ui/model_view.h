// The Model tab (issue 17 item 4): what the merged model writes for the run's fixed prompt after
// each validation round — the ledger's history first, then each eval round as it closes — newest
// on top, so a donor sees the text get better; and File ▸ Export's button (a Hugging Face folder,
// written by `expertswarm export` in a child process: the GUI holds no Torch object).
#pragma once

#include "core/node/node_reports.h"
#include "core/store/ledger.h"

#include <QWidget>

#include <optional>

class QLabel;
class QPushButton;
class QTreeWidget;

namespace es::ui {

class ModelView : public QWidget {
  Q_OBJECT

 public:
  explicit ModelView(QWidget* parent = nullptr);

  void loadHistory(const std::vector<store::SampleRow>& rows);
  void addRound(const node::RoundSummary& summary);  // shows summary.sample, if the round has one

  int sampleCount() const;
  QString textOfRound(std::int64_t round) const;  // prompt + continuation as shown, or ""
  QPushButton* exportButton() const { return export_; }

 Q_SIGNALS:
  void exportRequested();

 private:
  void addSample(std::int64_t round, const std::string& prompt, const std::string& text, std::optional<double> valLoss);

  QLabel* intro_ = nullptr;
  QTreeWidget* list_ = nullptr;
  QPushButton* export_ = nullptr;
};

}  // namespace es::ui
