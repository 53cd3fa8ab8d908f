//go:build cudaemu && !cuda

// The cudaemu build's C++ side is in emu/: cgo compiles only the C/C++
// files of this folder, so this file just includes it (see doc.go).
#include "emu/emulator.cc"
