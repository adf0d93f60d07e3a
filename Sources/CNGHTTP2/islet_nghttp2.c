#include "islet_nghttp2.h"
