"""PAM/TGR: the parallel abstract machine for term graph rewriting."""
