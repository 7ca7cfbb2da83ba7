import GRDB
import Terminal
