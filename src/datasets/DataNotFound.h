// DataNotFound: a data set's directory or file is missing (as opposed to present but wrong),
// so load_dataset can say how to get it.
#pragma once

#include <stdexcept>
#include <string>

namespace ringtrain {

class DataNotFound : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace ringtrain
