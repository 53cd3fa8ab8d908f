package model

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
)

// File names of a HuggingFace checkpoint's weights.
const (
	SingleFile = "model.safetensors"
	IndexFile  = "model.safetensors.index.json"
)

// Checkpoint is the set of safetensors files holding a model's weights:
// either one model.safetensors, or the shards model.safetensors.index.json
// maps tensor names to.
type Checkpoint struct {
	Dir   string
	files map[string]*SafetensorsFile // by base name
	where map[string]string           // tensor name → base name of its file
}

type indexJSON struct {
	WeightMap map[string]string `json:"weight_map"`
}

// OpenCheckpoint opens the weights in dir, preferring model.safetensors and
// falling back to the sharded index.
func OpenCheckpoint(dir string) (*Checkpoint, error) { return openCheckpoint(dir, false) }

// openCheckpoint is OpenCheckpoint, mapping the files when mapped is set
// (see openSafetensors).
func openCheckpoint(dir string, mapped bool) (*Checkpoint, error) {
	ck := &Checkpoint{Dir: dir, files: map[string]*SafetensorsFile{}, where: map[string]string{}}
	st, err := openSafetensors(filepath.Join(dir, SingleFile), mapped)
	switch {
	case err == nil:
		ck.files[SingleFile] = st
		for name := range st.tensors {
			ck.where[name] = SingleFile
		}
		return ck, nil
	case !errors.Is(err, fs.ErrNotExist):
		return nil, err
	}

	data, err := os.ReadFile(filepath.Join(dir, IndexFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s: neither %s nor %s found", dir, SingleFile, IndexFile)
	}
	if err != nil {
		return nil, err
	}
	var idx indexJSON
	if err := json.Unmarshal(data, &idx); err != nil {
		return nil, fmt.Errorf("%s: bad JSON: %w", IndexFile, err)
	}
	if len(idx.WeightMap) == 0 {
		return nil, fmt.Errorf("%s: weight_map is missing or empty", IndexFile)
	}
	// Sorted, so that of several problems the same one is always reported.
	for _, name := range slices.Sorted(maps.Keys(idx.WeightMap)) {
		file := idx.WeightMap[name]
		// Shards live next to the index; a path would let a downloaded
		// index point anywhere on disk.
		if file != filepath.Base(file) || file == "." || file == ".." {
			ck.Close()
			return nil, fmt.Errorf("%s: weight_map[%q] is %q; want a file name in the same directory", IndexFile, name, file)
		}
		if _, ok := ck.files[file]; !ok {
			st, err := openSafetensors(filepath.Join(dir, file), mapped)
			if err != nil {
				ck.Close()
				return nil, fmt.Errorf("%s: weight_map[%q]: %w", IndexFile, name, err)
			}
			ck.files[file] = st
		}
		if _, ok := ck.files[file].Info(name); !ok {
			ck.Close()
			return nil, fmt.Errorf("%s: weight_map puts tensor %q in %s, which does not hold it", IndexFile, name, file)
		}
		ck.where[name] = file
	}
	return ck, nil
}

// Names returns every tensor name in the checkpoint, sorted.
func (ck *Checkpoint) Names() []string {
	names := make([]string, 0, len(ck.where))
	for n := range ck.where {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Has reports whether the checkpoint holds tensor name.
func (ck *Checkpoint) Has(name string) bool {
	_, ok := ck.where[name]
	return ok
}

// Read returns tensor name as float32, checking that its shape is want.
func (ck *Checkpoint) Read(name string, want ...int) (*HostTensor, error) {
	st, _, err := ck.lookup(name, want...)
	if err != nil {
		return nil, err
	}
	return st.Read(name)
}

// lookup returns the file holding tensor name and its header entry,
// checking that its shape is want.
func (ck *Checkpoint) lookup(name string, want ...int) (*SafetensorsFile, TensorInfo, error) {
	file, ok := ck.where[name]
	if !ok {
		return nil, TensorInfo{}, fmt.Errorf("tensor %q not found in checkpoint %s", name, ck.Dir)
	}
	st := ck.files[file]
	ti, _ := st.Info(name)
	if !slices.Equal(ti.Shape, want) {
		return nil, TensorInfo{}, fmt.Errorf("tensor %q has shape %v; want %v", name, ti.Shape, want)
	}
	return st, ti, nil
}

// Close closes (or unmaps) every file of the checkpoint. Closing twice is
// harmless.
func (ck *Checkpoint) Close() error {
	var errs []error
	for _, st := range ck.files {
		errs = append(errs, st.Close())
	}
	return errors.Join(errs...)
}

// keepOnly closes every file not in keep and forgets it.
func (ck *Checkpoint) keepOnly(keep map[*SafetensorsFile]bool) error {
	var errs []error
	for name, st := range ck.files {
		if !keep[st] {
			errs = append(errs, st.Close())
			delete(ck.files, name)
		}
	}
	for tensor, file := range ck.where {
		if _, ok := ck.files[file]; !ok {
			delete(ck.where, tensor)
		}
	}
	return errors.Join(errs...)
}
