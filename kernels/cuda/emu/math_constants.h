// math_constants.h: the constants of CUDA's header of that name used here.
#pragma once
#include <cmath>
#define CUDART_INF_F INFINITY
