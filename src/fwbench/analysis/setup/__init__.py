"""The paper's setup and data sections: what the study ran on, the dataset and the loader."""
