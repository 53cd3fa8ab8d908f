module kvlab

go 1.26

require (
	github.com/cespare/xxhash/v2 v2.3.0
	github.com/google/go-cmp v0.7.0
	github.com/pkg/profile v1.7.0
	github.com/stretchr/testify v1.12.1
	gonum.org/v1/gonum v0.17.0
	gorgonia.org/cu v0.9.6
)

require (
	github.com/felixge/fgprof v0.9.3 // indirect
	github.com/google/pprof v0.0.0-20211214055906-6f57359322fd // indirect
	github.com/google/uuid v1.1.1 // indirect
	github.com/pkg/errors v0.9.1 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
)
