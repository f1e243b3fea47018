"""dqnlab: a small DQN toolkit (vectorised torch environments, replay, agent)."""
from .agent import DQNAgent, QNetwork
from .envs import VecCartPole
from .replay import ReplayBuffer

__version__ = "0.3.1"
