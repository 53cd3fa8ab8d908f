package cli

import "kvlab/common/model"

// DefaultModel returns the options of the built-in synthetic model
// (model.Builtin); the runnables use it when -model is omitted.
func DefaultModel() model.SynthOptions { return model.Builtin() }

// DefaultModelDir returns the built-in model's directory, writing the model
// on first use (model.BuiltinDir).
func DefaultModelDir() (string, error) { return model.BuiltinDir() }
