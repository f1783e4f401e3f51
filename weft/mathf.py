"""PLACEHOLDER (being replaced): Weft's float32 transcendentals."""
import numpy as np

def exp(x): return np.exp(np.asarray(x, np.float64)).astype(np.float32)
def log(x): return np.log(np.asarray(x, np.float64)).astype(np.float32)
def tanh(x): return np.tanh(np.asarray(x, np.float64)).astype(np.float32)
def erf(x):
    import scipy.special
    return scipy.special.erf(np.asarray(x, np.float64)).astype(np.float32)
def sigmoid(x): return (1 / (1 + np.exp(-np.asarray(x, np.float64)))).astype(np.float32)
