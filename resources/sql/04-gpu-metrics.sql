-- Ledger schema version 4: what the GPU was doing at a step (issue 16 item 5), read through NVML
-- when the step's report reached the node, at most once a second. NULL on a CPU and on steps
-- without a fresh reading: the ledger never repeats an old value.
ALTER TABLE metrics ADD COLUMN gpu_utilization REAL;      -- percent
ALTER TABLE metrics ADD COLUMN gpu_memory_used_mib REAL;
ALTER TABLE metrics ADD COLUMN gpu_temperature_c REAL;
ALTER TABLE metrics ADD COLUMN gpu_power_w REAL;
