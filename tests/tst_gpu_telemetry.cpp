// Issue 16 item 5: NVML is loaded at run time. Without the driver's library the telemetry says so
// (and the client starts: nothing links against it); with one (a fake with one fixed GPU, built
// beside this test) every figure comes through with its unit converted.
#include "core/gpu/nvml_telemetry.h"

#include <QtTest>

class GpuTelemetryTest : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void aMissingDriverIsAClearError() {
    auto t = es::gpu::NvmlTelemetry::open("libnvidia-ml-not-here.so.1");
    QVERIFY(!t.ok());
    QVERIFY2(QString::fromStdString(t.error()).contains("libnvidia-ml-not-here.so.1 not loaded"), t.error().c_str());
    auto wrong = es::gpu::NvmlTelemetry::open("libc.so.6");  // loads, but is not NVML
    QVERIFY(!wrong.ok());
    QVERIFY2(QString::fromStdString(wrong.error()).contains("lacks an NVML entry point"), wrong.error().c_str());
  }

  void figuresComeThroughFromTheLibrary() {
    auto t = es::gpu::NvmlTelemetry::open(ES_FAKE_NVML);
    QVERIFY2(t.ok(), t.ok() ? "" : t.error().c_str());
    QCOMPARE((*t)->deviceCount(), 1);
    auto s = (*t)->sample(0);
    QVERIFY(s.ok());
    QCOMPARE(s->name, std::string("Fake GPU 80GB"));
    QCOMPARE(s->memoryTotalBytes, std::int64_t(80) << 30);
    QCOMPARE(s->memoryFreeBytes, std::int64_t(70) << 30);
    QCOMPARE(s->memoryUsedBytes, std::int64_t(10) << 30);
    QCOMPARE(s->utilizationPercent, 42);
    QCOMPARE(s->temperatureC, 67);
    QCOMPARE(s->powerWatts, 251.5);
    QVERIFY(!(*t)->sample(1).ok());
  }

  void deviceNamesGiveTheirIndex() {
    QCOMPARE(es::gpu::cudaIndexOf("cuda"), 0);
    QCOMPARE(es::gpu::cudaIndexOf("cuda:3"), 3);
    QCOMPARE(es::gpu::cudaIndexOf("cpu"), -1);
    QCOMPARE(es::gpu::cudaIndexOf("auto"), -1);
  }
};

QTEST_GUILESS_MAIN(GpuTelemetryTest)
#include "tst_gpu_telemetry.moc"
