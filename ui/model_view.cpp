#include "ui/model_view.h"

#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QPushButton>
#include <QTreeWidget>
#include <QVBoxLayout>

namespace es::ui {
namespace {

enum Column { kRound, kValLoss, kText };

// The model's bytes as text: invalid UTF-8 (a token can end mid-character) shows as U+FFFD, and
// control characters but newline and tab as their code, so one sample cannot garble the view.
QString shown(const std::string& bytes) {
  QString text = QString::fromUtf8(bytes.data(), qsizetype(bytes.size()));
  for (auto& c : text)
    if (c.unicode() < 0x20 && c != QLatin1Char('\n') && c != QLatin1Char('\t')) c = QChar(0xFFFD);
  return text;
}

}  // namespace

ModelView::ModelView(QWidget* parent) : QWidget(parent) {
  intro_ = new QLabel(tr("What the merged model writes for the run's prompt after each validation round "
                         "(greedy, %1 tokens). Newest first.")
                          .arg(32));
  intro_->setWordWrap(true);
  export_ = new QPushButton(tr("Export for Hugging Face…"));
  export_->setObjectName(QStringLiteral("exportModel"));
  export_->setToolTip(tr("Write the newest merged model as a folder that transformers loads"));
  list_ = new QTreeWidget;
  list_->setObjectName(QStringLiteral("modelSamples"));
  list_->setHeaderLabels({tr("Round"), tr("Val loss"), tr("Writes")});
  list_->setRootIsDecorated(false);
  list_->setWordWrap(true);
  list_->header()->setSectionResizeMode(kText, QHeaderView::Stretch);
  list_->header()->setStretchLastSection(true);
  auto* top = new QHBoxLayout;
  top->addWidget(intro_, 1);
  top->addWidget(export_);
  auto* layout = new QVBoxLayout(this);
  layout->addLayout(top);
  layout->addWidget(list_, 1);
  connect(export_, &QPushButton::clicked, this, &ModelView::exportRequested);
}

void ModelView::loadHistory(const std::vector<store::SampleRow>& rows) {
  list_->clear();
  for (const auto& r : rows) addSample(r.round, r.prompt, r.text, r.valLoss);
}

void ModelView::addRound(const node::RoundSummary& s) {
  if (s.sample) addSample(s.round, s.sample->prompt, s.sample->text, s.valLoss);
}

void ModelView::addSample(std::int64_t round, const std::string& prompt, const std::string& text,
                          std::optional<double> valLoss) {
  // One row per round: a round merged again (after a resync) replaces its row.
  for (int i = 0; i < list_->topLevelItemCount(); ++i)
    if (list_->topLevelItem(i)->data(kRound, Qt::UserRole).toLongLong() == round) delete list_->takeTopLevelItem(i--);
  auto* item = new QTreeWidgetItem;
  item->setData(kRound, Qt::UserRole, qlonglong(round));
  item->setText(kRound, QString::number(round));
  item->setText(kValLoss, valLoss ? QString::number(*valLoss, 'f', 4) : QStringLiteral("–"));
  item->setText(kText, shown(prompt) + QStringLiteral("▸") + shown(text));
  item->setToolTip(kText, tr("Prompt: %1").arg(shown(prompt)));
  int at = 0;  // newest round on top
  while (at < list_->topLevelItemCount() && list_->topLevelItem(at)->data(kRound, Qt::UserRole).toLongLong() > round)
    ++at;
  list_->insertTopLevelItem(at, item);
}

int ModelView::sampleCount() const { return list_->topLevelItemCount(); }

QString ModelView::textOfRound(std::int64_t round) const {
  for (int i = 0; i < list_->topLevelItemCount(); ++i)
    if (list_->topLevelItem(i)->data(kRound, Qt::UserRole).toLongLong() == round)
      return list_->topLevelItem(i)->text(kText);
  return {};
}

}  // namespace es::ui
