#include "app/model_command_line.h"

#include <QCommandLineParser>
#include <QRegularExpression>

#include <cmath>

namespace es::app {
namespace {

const QStringList kVerbs = {QStringLiteral("export"), QStringLiteral("sample"), QStringLiteral("eval")};

ModelParseResult failure(const QString& verb, const QString& message) {
  return {std::nullopt, 2,
          QStringLiteral("expertswarm %1: %2\nTry 'expertswarm %1 --help' for more information.\n").arg(verb, message)};
}

QString description(const QString& verb) {
  if (verb == QLatin1String("export"))
    return QStringLiteral("Write the run's newest merged model as a Hugging Face folder (Mixtral + tokenizer.json).");
  if (verb == QLatin1String("sample")) return QStringLiteral("Generate text from the run's newest merged model.");
  return QStringLiteral("Print tokens, loss and perplexity of the run's newest merged model on a text file.");
}

// The verb's own options, checked into `c`; an error message, or empty.
QString readVerbOptions(const QCommandLineParser& p, ModelCommand& c) {
  const QString v = c.verb;
  if (v == QLatin1String("export")) {
    c.out = p.value(QStringLiteral("out"));
    return c.out.isEmpty() ? QStringLiteral("--out DIR is required") : QString();
  }
  if (v == QLatin1String("eval")) {
    c.textFile = p.value(QStringLiteral("text"));
    return c.textFile.isEmpty() ? QStringLiteral("--text FILE is required") : QString();
  }
  c.prompt = p.value(QStringLiteral("prompt"));
  if (!p.isSet(QStringLiteral("prompt")) || c.prompt.isEmpty()) return QStringLiteral("--prompt TEXT is required");
  bool ok = true;
  if (p.isSet(QStringLiteral("tokens"))) c.tokens = p.value(QStringLiteral("tokens")).toInt(&ok);
  if (!ok || c.tokens < 1 || c.tokens > 65536) return QStringLiteral("--tokens must be an integer in [1, 65536]");
  if (p.isSet(QStringLiteral("temperature"))) c.temperature = p.value(QStringLiteral("temperature")).toDouble(&ok);
  if (!ok || !std::isfinite(c.temperature) || c.temperature < 0 || c.temperature > 100)
    return QStringLiteral("--temperature must be a number in [0, 100] (0: greedy)");
  if (p.isSet(QStringLiteral("top-k"))) c.topK = p.value(QStringLiteral("top-k")).toInt(&ok);
  if (!ok || c.topK < 0 || c.topK > 65536) return QStringLiteral("--top-k must be an integer in [0, 65536] (0: all)");
  if (p.isSet(QStringLiteral("seed"))) c.seed = p.value(QStringLiteral("seed")).toULongLong(&ok);
  return ok ? QString() : QStringLiteral("--seed must be a non-negative integer");
}

}  // namespace

bool isModelCommand(const QStringList& arguments) { return arguments.size() > 1 && kVerbs.contains(arguments[1]); }

ModelParseResult parseModelCommand(const QStringList& arguments) {
  ModelCommand c;
  c.verb = arguments.value(1);
  QCommandLineParser p;
  p.setApplicationDescription(description(c.verb));
  p.addOption({{QStringLiteral("h"), QStringLiteral("help")}, QStringLiteral("Show this help.")});
  p.addOption({QStringLiteral("run"), QStringLiteral("The run: 'default', a folder with run.json, or its magnet link."),
               QStringLiteral("RUN"), QStringLiteral("default")});
  p.addOption({QStringLiteral("data-dir"), QStringLiteral("Where state is kept."), QStringLiteral("DIR")});
  if (c.verb == QLatin1String("export"))
    p.addOption({QStringLiteral("out"), QStringLiteral("The folder to write (replaced if it is an earlier export)."),
                 QStringLiteral("DIR")});
  if (c.verb == QLatin1String("eval"))
    p.addOption(
        {QStringLiteral("text"), QStringLiteral("A UTF-8 text file (at most 64 MiB)."), QStringLiteral("FILE")});
  if (c.verb != QLatin1String("export"))
    p.addOption({QStringLiteral("device"), QStringLiteral("auto (a GPU when available), cpu, cuda or cuda:N."),
                 QStringLiteral("DEVICE"), QStringLiteral("auto")});
  if (c.verb == QLatin1String("sample")) {
    p.addOption({QStringLiteral("prompt"), QStringLiteral("The text to continue."), QStringLiteral("TEXT")});
    p.addOption({QStringLiteral("tokens"), QStringLiteral("New tokens (default 64)."), QStringLiteral("N")});
    p.addOption({QStringLiteral("temperature"), QStringLiteral("0: greedy (default 0.8)."), QStringLiteral("T")});
    p.addOption({QStringLiteral("top-k"), QStringLiteral("Sample among the K likeliest; 0: all (default 40)."),
                 QStringLiteral("K")});
    p.addOption({QStringLiteral("seed"), QStringLiteral("Same seed, same text (default 1)."), QStringLiteral("S")});
  }
  QStringList rest = arguments;
  rest.removeAt(1);  // the verb
  if (!p.parse(rest)) return failure(c.verb, p.errorText());
  if (p.isSet(QStringLiteral("help"))) return {std::nullopt, 0, p.helpText()};
  if (!p.positionalArguments().isEmpty())
    return failure(c.verb, QStringLiteral("unexpected argument '%1'").arg(p.positionalArguments().first()));
  c.run = p.value(QStringLiteral("run"));
  c.dataDir = p.value(QStringLiteral("data-dir"));
  if (c.run.isEmpty()) return failure(c.verb, QStringLiteral("--run needs a value"));
  if (p.isSet(QStringLiteral("data-dir")) && c.dataDir.isEmpty())
    return failure(c.verb, QStringLiteral("--data-dir needs a value"));
  if (c.run.startsWith(QLatin1String("magnet:"))) {
    c.runMagnetHash = runIdOfMagnet(c.run);
    if (c.runMagnetHash.isEmpty()) return failure(c.verb, QStringLiteral("--run: a magnet link without a v2 run id"));
  }
  if (const QString problem = readVerbOptions(p, c); !problem.isEmpty()) return failure(c.verb, problem);
  if (c.verb != QLatin1String("export")) {
    c.device = p.value(QStringLiteral("device"));
    static const QRegularExpression deviceSyntax(QStringLiteral("^(auto|cpu|cuda(:[0-9]{1,2})?)$"));
    if (!deviceSyntax.match(c.device).hasMatch())
      return failure(c.verb, QStringLiteral("--device must be auto, cpu, cuda or cuda:N, not '%1'").arg(c.device));
  }
  return {c, 0, {}};
}

}  // namespace es::app
