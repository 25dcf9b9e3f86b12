// A trainer's weights by wire name (tensor_names.h): read them for a contribution, replace them
// with a merged state. The optimizer moments are kept, as SPES keeps local optimizer state across
// merges. Torch types: not for headers that moc reads.
#pragma once

#include "core/checkpoint/safetensors.h"
#include "core/checkpoint/training_state.h"
#include "core/train/trainer.h"

namespace es::train {

// Detached float32 CPU copies of every model tensor, in the model's parameter order.
ckpt::NamedTensors trainerWeights(const Trainer& trainer);

// Copies every model tensor from `weights` (all names present, exact shapes; extra names are an
// error). On error nothing has been changed.
Status setTrainerWeights(Trainer& trainer, const ckpt::NamedTensors& weights);

// A private deep copy of the full training state (what saveState writes), so it can be written on
// another thread while this one keeps training.
ckpt::TrainingState captureTrainingState(const Trainer& trainer);

}  // namespace es::train
