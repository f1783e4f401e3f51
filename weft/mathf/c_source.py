C_UNARY_NAMES = {}
C_BINARY_NAMES = {}
def c_math_source(lanes): raise NotImplementedError
